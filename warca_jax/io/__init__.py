"""Reading and writing: files read bounded and regular-only (``reads``,
``bounded_reads``), written atomically and never through a link (``writes``), a run's
workdir files (``run_files``) and its lock (``workdir_lock``), and config files loaded by
path (``config_files``)."""
