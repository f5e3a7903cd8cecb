"""The maths: WARCA's equations and their closed-form gradients (``losses``), the AON and
Frobenius penalties (``penalties``), kernels and distances (``kernels``, ``distances``),
the linear algebra the learners share (``linalg``), the optimiser with the penalty
(``optim``), the draws of pairs and violators (``sampling``), k-means (``clustering``) and
the device mesh that training and evaluation run on (``device_mesh``)."""
