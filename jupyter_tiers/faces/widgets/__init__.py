"""Live views of jobs: the anywidget JobView for JupyterLab and a plain-text fallback."""
