"""Emission: Python source from backend output, through templates and black."""
