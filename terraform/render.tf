# The render service (docs/rendering.md): a Cloud Run service whose container holds Chromium
# (infra/render/Dockerfile). Sample and scrape call it for pages read by a browser (render = auto |
# always); the five functions hold no browser. Declared only when var.render_image names an image.
#
# Like the functions it has no public invoker: Cloud Run admits sample's and scrape's identities,
# and the code trusts the identity token that reached it (GLEANER_HTTP_AUTH=iam). Every request a
# rendered page makes goes through its Fetcher, which reads the run's robots.txt decisions, budget
# and shared per-host turns from Cloud SQL, so it logs in as its own IAM database user.

variable "render_image" {
  description = "Container image of the render service (built from infra/render/Dockerfile); empty: no render service, renderings are recorded failed and plain fetches stand."
  type        = string
  default     = ""
}

variable "render_repository" {
  description = "Artifact Registry repository Cloud Build pushes the render image to (cloudbuild.yaml _RENDER_REPOSITORY)."
  type        = string
  default     = "gleaner-render"
}

variable "render_max_instances" {
  description = "Most render instances at once (each 2 vCPU, 2 GiB, two pages at a time)."
  type        = number
  default     = 3
}

locals {
  render_enabled = var.render_image != ""
  # The stages that render: sample (a section's sample under auto) and scrape (the section's pages).
  render_callers = ["sample", "scrape"]
  render_url     = "https://gleaner-render-${data.google_project.this.number}.${var.region}.run.app/"
  # What the callers' environments add (functions.tf): where to send a page to be rendered.
  render_env = { for name in local.render_callers : name => { GLEANER_RENDER_URL = local.render_url } if local.render_enabled }
  # Its share of the Cloud SQL connection budget (functions.tf, docs/deployment.md "Connections"): each
  # instance renders two pages at once, each page's Fetcher reading and writing the run's robots.txt
  # answers, budget and host turns through the same pool (pool + overflow) as a function's.
  render_db_peak = local.render_enabled ? var.render_max_instances * local.db_per_instance : 0
}

# Where Cloud Build pushes the image (cloudbuild.yaml, steps render-tag and render-image). Declared
# whether or not render_image is set: the build needs it before the first image exists.
resource "google_artifact_registry_repository" "render" {
  repository_id          = var.render_repository
  location               = var.region
  format                 = "DOCKER"
  description            = "Gleaner's render service images (built by Cloud Build from infra/render/Dockerfile)."
  cleanup_policy_dry_run = false

  # As for the functions' images (build.tf): the newest few stay as rollback targets, older ones go.
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

# The build's identity pushes the image (and asks whether a tag exists); Cloud Run's service agent
# reads it from a repository of the same project without a grant.
resource "google_artifact_registry_repository_iam_member" "render_build" {
  location   = google_artifact_registry_repository.render.location
  repository = google_artifact_registry_repository.render.name
  role       = "roles/artifactregistry.writer"
  member     = "serviceAccount:${google_service_account.builder.email}"
}

resource "google_service_account" "render" {
  count        = local.render_enabled ? 1 : 0
  account_id   = "gl-render"
  display_name = "Gleaner render service"
  depends_on   = [google_project_service.enabled]
}

resource "google_sql_user" "render" {
  count    = local.render_enabled ? 1 : 0
  name     = trimsuffix(google_service_account.render[0].email, ".gserviceaccount.com")
  instance = google_sql_database_instance.main.name
  type     = "CLOUD_IAM_SERVICE_ACCOUNT"
}

resource "google_project_iam_member" "render_sql" {
  for_each = local.render_enabled ? toset(["roles/cloudsql.client", "roles/cloudsql.instanceUser"]) : toset([])
  project  = var.project_id
  role     = each.key
  member   = "serviceAccount:${google_service_account.render[0].email}"
}

resource "google_cloud_run_v2_service" "render" {
  count    = local.render_enabled ? 1 : 0
  name     = "gleaner-render"
  location = var.region

  template {
    service_account                  = google_service_account.render[0].email
    timeout                          = "120s"
    max_instance_request_concurrency = 2
    scaling {
      max_instance_count = var.render_max_instances
    }
    containers {
      image = var.render_image
      resources {
        limits = { cpu = "2", memory = "2Gi" }
      }
      dynamic "env" {
        for_each = merge(local.common_env, {
          GLEANER_CLOUDSQL_USER = google_sql_user.render[0].name
        })
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }
  depends_on = [google_project_service.enabled]
}

resource "google_cloud_run_v2_service_iam_member" "render_callers" {
  for_each = local.render_enabled ? toset(local.render_callers) : toset([])
  name     = google_cloud_run_v2_service.render[0].name
  location = var.region
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.fn[each.key].email}"
}

output "render_url" {
  description = "The render service's URL: give it to sample and scrape as GLEANER_RENDER_URL (empty when not deployed)."
  value       = local.render_enabled ? local.render_url : ""
}

output "render_db_bootstrap_sql" {
  description = "Run once as the postgres user after the render service is first declared (db_bootstrap_sql's grant for its user)."
  value       = local.render_enabled ? "GRANT ${var.database_role} TO \"${google_sql_user.render[0].name}\";" : ""
}
