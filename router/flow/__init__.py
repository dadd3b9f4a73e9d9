"""Flow control in the router (issue 23, docs/flow-control.md)."""
