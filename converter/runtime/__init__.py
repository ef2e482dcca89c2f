"""Runtime layer: convert a file, compile and run it on CPU (one or many processes), oracles."""
