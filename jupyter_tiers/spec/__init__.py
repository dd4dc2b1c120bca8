"""Every magic option, declared once; the validated job and service specs; the routing guard."""
