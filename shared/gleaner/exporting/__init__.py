"""Export: a site's current tree written out as markdown files with a manifest, or as JSON Lines / Parquet."""
