"""Lowest layer: errors, atomic file writes, text tables, memory checks."""
