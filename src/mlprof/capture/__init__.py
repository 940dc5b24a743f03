"""The raw capture directory: the contract between collection and parsing."""
