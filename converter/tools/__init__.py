"""Tools layer: the command line and its commands."""
