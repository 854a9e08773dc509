"""The reports wing: the plain-text kit, the rich terminal tables, the HTML and Markdown
report, and the cross-run commands compare and history."""
