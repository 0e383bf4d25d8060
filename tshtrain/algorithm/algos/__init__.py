"""The algorithms, one module each, composed from :mod:`tshtrain.algorithm.blocks`. Import them from
:mod:`tshtrain.algorithm`."""
