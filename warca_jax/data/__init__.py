"""The data as arrays: ``Dataset`` and ``Split`` and the one validation of features, ids and
splits (``dataset_arrays``), every draw of identity splits (``identity_splits``), and the
built-in synthetic data (``synthetic``). It imports nothing else of the library: the maths
check their inputs with it and the dataset readers fill it."""
