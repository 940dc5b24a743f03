"""Tensor Core use: kernels known by their names to run on the matrix units, and their share of kernel time."""

from __future__ import annotations

import duckdb
import pytest

from mlprof.analysis import kernel_statistic
from mlprof.analysis.gpu_metrics import gpu_metrics
from mlprof.tables.names import tensor_core_kernel_sql
from mlprof.tables.store import TableStore

# Kernel names from real traces and library conventions, by whether they use the matrix units.
USES = [
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4",  # cuDNN, TF32
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>(cutlass_80_tensorop_s1688gemm_128x64)",
    "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_128x128_16x4_nhwc_unity_stride_align4>",
    "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", "turing_h1688gemm_256x128_ldg8_nn",
    "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", "volta_h884cudnn_256x64_ldg8_relu_exp_medium_nhwc_tn_v1",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel",
    "sm90_gemm_tma_warpspecialized_gmma_ss_bf16", "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4>>",
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80",
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1",  # rocBLAS/Tensile on MFMA
]
DOES_NOT = [
    "volta_sgemm_64x64_nt", "ampere_sgemm_32x32_sliced1x4_tn", "cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1",
    "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>", "void gemmSN_TN_kernel<float, 128, 16, 2>",
    "void gemv2T_kernel_val<int, int, float, float, 128, 16>", "Memcpy HtoD (Pageable -> Device)",
]


@pytest.mark.parametrize("name,uses", [(n, True) for n in USES] + [(n, False) for n in DOES_NOT])
def test_a_kernel_is_known_by_its_name(name, uses):
    # A connection of its own: a result left unfinished on duckdb's module-wide connection broke a later
    # test's duckdb.sql() in the same worker.
    with duckdb.connect() as con:
        assert con.execute(f"SELECT {tensor_core_kernel_sql('$1')}", [name]).fetchall() == [(uses,)]


def _direct(store: TableStore) -> tuple[int, int]:
    """Tensor Core and all kernel time in the steps, summed in Python over the names listed above."""
    rows = store.rows("SELECT name, dur_ns FROM device_ops WHERE kind = 'kernel' AND step IS NOT NULL")
    marks = ("tensorop", "xmma", "_mi16x16x1_")  # what the real traces' Tensor Core kernels are named by
    return sum(d for n, d in rows if any(m in n.lower() for m in marks)), sum(d for _, d in rows)


@pytest.mark.parametrize("key,some", [("nccl", True), ("rank0", True), ("amd", True), ("ns_resolution", False)])
def test_the_share_of_kernel_time_on_tensor_cores_in_real_traces(gpu_traces, key, some):
    with TableStore(gpu_traces[key] / "tables") as store:
        tensor, kernels = _direct(store)
        share = gpu_metrics(store)["tensor_core_share"]
        flagged = {r["name"] for r in kernel_statistic(store) if r["tensor_cores"]}
        named = {n for (n,) in store.rows("SELECT DISTINCT name FROM device_ops WHERE kind = 'kernel'")
                 if any(m in n.lower() for m in ("tensorop", "xmma", "_mi16x16x1_"))}
    assert share == pytest.approx(tensor / kernels)
    assert (share > 0) is some  # the V100 job ran FP32 SIMT kernels (volta_sgemm, scudnn) only
    assert flagged == named
