# How the functions are built. Since mid-2024 a new project's default Cloud Build identity may lack
# what a function build needs (Google's "Custom service account for Cloud Build" page), so every
# function names its own build identity, gl-fn-build, with only what a build does: write its
# logs, read the function source Google copies into its gcf-v2-sources bucket (created on the
# first deploy, so the grant cannot name it), and push the image to our repository.
resource "google_service_account" "function_build" {
  account_id   = "gl-fn-build"
  display_name = "Gleaner: identity of the functions' builds (Cloud Build)"
  depends_on   = [google_project_service.enabled]
}

resource "google_project_iam_member" "function_build" {
  for_each = toset(["roles/logging.logWriter", "roles/storage.objectViewer"])
  project  = var.project_id
  role     = each.value
  member   = "serviceAccount:${google_service_account.function_build.email}"
}

# The functions' images, in a repository of ours instead of the gcf-artifacts one Google creates, so
# that it can have a cleanup policy: every deploy of a changed function pushes a new image, and
# without one they accumulate (and are billed as Artifact Registry storage) forever.
resource "google_artifact_registry_repository" "functions" {
  repository_id          = "gleaner-functions"
  location               = var.region
  format                 = "DOCKER"
  description            = "Gleaner's function images (built by Cloud Build on deploy)."
  cleanup_policy_dry_run = false

  # KEEP wins over DELETE: the newest images of each function stay (a rollback target), anything
  # else older than a week goes.
  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = var.function_images_kept
    }
  }
  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      older_than = "604800s"
    }
  }

  depends_on = [google_project_service.enabled]
}

resource "google_artifact_registry_repository_iam_member" "function_build" {
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = "serviceAccount:${google_service_account.function_build.email}"
}

variable "function_images_kept" {
  description = "Images of each function kept in the repository whatever their age (older ones go after a week)."
  type        = number
  default     = 3
}
