"""Distributed training: the strategy of a replica, CustomJob worker pools, local clusters."""
