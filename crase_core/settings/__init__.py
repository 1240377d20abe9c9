"""Every setting, declared once: the knobs, their sections, the settings file and the environment."""
