"""The training job's protocol, pure: arrays, job directories, logs, metrics, status, requeues,
signals, fail-stop, history, the enclosing job's environment."""
