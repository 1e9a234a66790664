"""Start-up of every Python process of the simulated GPU (see simulated_driver.py): kernel launches run on the
CUDA emulator."""

import simulated_driver

simulated_driver.install()
