"""WARCA in the method registry (the learner itself is ``warca_jax.warca``)."""

from warca_jax import warca
from warca_jax.methods import Method

METHODS = {"warca": Method(fit=warca.fit, validate=warca.validate, takes_callback=True)}
