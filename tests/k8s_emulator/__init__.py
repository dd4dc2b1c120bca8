"""A Kubernetes API emulator for the tests of jupyter-tiers (never imported by ``jupyter_tiers``).

It speaks the real HTTP protocol to the official ``kubernetes`` client: see :mod:`.store`
(objects, watch history, garbage collection), :mod:`.server` (HTTP API) and :mod:`.emulator`
(wiring, kubeconfig)."""
