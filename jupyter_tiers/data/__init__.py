"""What travels between the notebook, the cluster and the object store: --sync's files, files back,
object-store URIs, checkpoint uploads, the train-to-serve handoff, the local tier's model cache."""
