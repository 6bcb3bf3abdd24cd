"""What every package's worker does alike, tested once and parametrised over the four systems
(``conftest.py`` describes each)."""
