terraform {
  required_version = ">= 1.6"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
    # google_project_service_identity (the Pub/Sub service agent, created before it is granted
    # anything) exists only in the beta provider.
    google-beta = {
      source  = "hashicorp/google-beta"
      version = ">= 6.0, < 8.0"
    }
    # time_sleep: alerts wait for their log-based metrics to propagate (monitoring.tf).
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1.0"
    }
  }
  # Configure a GCS backend per environment: terraform init -backend-config="bucket=…" -backend-config="prefix=gleaner"
  backend "gcs" {}
}

provider "google" {
  project = var.project_id
  region  = var.region
}

provider "google-beta" {
  project = var.project_id
  region  = var.region
}

data "google_project" "this" {
  depends_on = [google_project_service.enabled]
}
