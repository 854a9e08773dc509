"""The candidates of a task, shared by the kinds that rank or score them (allocation,
listwise): resume screening, essay grading and a task of your own, their data
fields (``spec``), their candidates and pools (``task``) and how each is built."""
