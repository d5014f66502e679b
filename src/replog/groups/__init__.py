"""Consumer groups: the sans-IO group coordinator and the __consumer_offsets formats."""
