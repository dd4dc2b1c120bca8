"""The plain-data state of the notebook views (JobView, ServeView, the ArrayView table): pure
functions of statuses and log lines, shared by the widgets and the server's REST details so that
the REST path never loads anywidget or ipywidgets.
"""
