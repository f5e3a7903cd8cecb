"""Reading and writing: files read bounded and regular-only (``reads``,
``bounded_reads``), written atomically and never through a link (``writes``), a run's
workdir files (``run_files``) and its lock (``workdir_lock``), config files loaded by
path (``config_files``), and the progress of long work on a terminal or in the log
(``progress_report``)."""
