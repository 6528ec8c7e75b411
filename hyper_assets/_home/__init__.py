"""The file's home: a local path or an object store's generations, leases and working
copies."""
