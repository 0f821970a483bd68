"""The region names of the step breakdown, in the order of its rows and charts (the regions of
view ``regions``, ``store/sql/views_regions.sql``; ``other`` is time no region marks)."""

REGIONS = ("forward", "loss", "backward", "optimizer_step", "data_loading", "other")
