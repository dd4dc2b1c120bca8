"""The Slurm tier: sbatch over SSH, batched status, per-rank state and log streaming."""
