"""fake_providers package."""
