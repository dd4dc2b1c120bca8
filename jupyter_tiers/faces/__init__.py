"""What users touch: the cell magics, the `jupyter tiers` command, %tiers, the widgets and the
jupyter-server extension behind the sidebar."""
