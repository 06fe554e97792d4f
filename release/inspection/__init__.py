"""What makes a wheel count as built: its files, auditwheel's verdict, and the device code it
holds.
"""
