resource "google_storage_bucket" "blobs" {
  name                        = var.blob_bucket
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  # Objects are immutable by construction (create-only writes keyed by content hash).
  versioning {
    enabled = false
  }

  # Run-scoped artefacts (domains/{site}/runs/{run}/…) expire; snapshots never do. A lifecycle
  # `matches_prefix` is a literal prefix (no wildcard for the site), so domains/*/runs/ cannot be
  # written as one; instead the GCS adapter stamps run artefacts with Custom-Time at upload and
  # this rule deletes by it. Objects without Custom-Time (the snapshots) never match.
  lifecycle_rule {
    condition {
      days_since_custom_time = var.run_artefact_retention_days
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.enabled]
}
