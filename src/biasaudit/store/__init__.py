"""The store wing: the SQLite response cache (with its batch and lease tables), run
directories, and the liveness of the processes that hold claims in them."""
