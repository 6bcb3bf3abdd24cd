"""pytest plugin: server and client fixtures for beanstalkd, Gearman, Workq and qless.

(Being written: see docs/testing.md once it lands.)
"""
