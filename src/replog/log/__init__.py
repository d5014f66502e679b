"""replog.log."""
