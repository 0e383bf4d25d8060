"""Building blocks of the algorithms: policies, networks, normalisers, schedules, target networks, the
entropy temperature, the actor-critic components, the shared update pieces (one optimizer step, the
on-policy update loop, replay sampling with n-step targets). Import them from :mod:`tshtrain.algorithm`."""
