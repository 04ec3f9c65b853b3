# The language-model page decider (docs/llm.md): off unless var.llm_provider names a provider. Only the
# sample function asks the model, so only it gets the settings, the key and the Vertex AI role.
#   gemini: Vertex AI through the function's own service account (no key); its API is enabled here.
#   openai: any OpenAI-compatible endpoint; its key is a Secret Manager secret created once by an operator,
#     outside Terraform, so the value never passes through a build, a tfvars file or the state:
#       printf %s "$KEY" | gcloud secrets create gleaner-llm-api-key --data-file=-
locals {
  llm_enabled  = var.llm_provider != "none"
  llm_callers  = ["sample"]
  llm_with_key = local.llm_enabled && var.llm_api_key_secret_id != ""
  llm_env = { for name in local.llm_callers : name => merge({
    GLEANER_LLM_PROVIDER       = var.llm_provider
    GLEANER_LLM_MODEL          = var.llm_model
    GLEANER_LLM_RUN_MAX_CALLS  = tostring(var.llm_run_max_calls)
    GLEANER_LLM_RUN_MAX_TOKENS = tostring(var.llm_run_max_tokens)
  }, var.llm_base_url != "" ? { GLEANER_LLM_BASE_URL = var.llm_base_url } : {}) if local.llm_enabled }
}

data "google_secret_manager_secret" "llm_api_key" {
  count      = local.llm_with_key ? 1 : 0
  secret_id  = var.llm_api_key_secret_id
  depends_on = [google_project_service.enabled]
}

resource "google_secret_manager_secret_iam_member" "llm_api_key" {
  for_each  = local.llm_with_key ? toset(local.llm_callers) : toset([])
  secret_id = data.google_secret_manager_secret.llm_api_key[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.fn[each.key].email}"
}

# Only where the model is Gemini: a deployment without one enables no Vertex AI.
resource "google_project_service" "vertex" {
  count              = var.llm_provider == "gemini" ? 1 : 0
  service            = "aiplatform.googleapis.com"
  disable_on_destroy = false
}

resource "google_project_iam_member" "llm_vertex" {
  for_each   = var.llm_provider == "gemini" ? toset(local.llm_callers) : toset([])
  project    = var.project_id
  role       = "roles/aiplatform.user"
  member     = "serviceAccount:${google_service_account.fn[each.key].email}"
  depends_on = [google_project_service.enabled, google_project_service.vertex]
}
