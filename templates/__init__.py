"""Jinja2 templates of emitted code (shipped inside the wheel)."""
