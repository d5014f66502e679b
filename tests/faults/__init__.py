"""Multi-process fault suite: real broker processes on loopback with the ZooKeeper backend."""
