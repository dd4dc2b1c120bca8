"""The tier contract, the Job and Service handles, the one watch protocol, the batch watcher and
HTTP to a service through its forward."""
