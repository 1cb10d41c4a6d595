{{/* The release's object names and labels. */}}
{{- define "flakeid.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "flakeid.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "flakeid.labels" -}}
{{ include "flakeid.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* A URL value: from a Secret of the user's, or from the chart's Secret.
     Fails without either: per-pod files would issue duplicate IDs. */}}
{{- define "flakeid.urlEnv" -}}
{{- $v := index .root.Values .what -}}
{{- if $v.existingSecret.name }}
valueFrom:
  secretKeyRef:
    name: {{ $v.existingSecret.name }}
    key: {{ $v.existingSecret.key | default "url" }}
{{- else if $v.url }}
valueFrom:
  secretKeyRef:
    name: {{ include "flakeid.fullname" .root }}-urls
    key: {{ .what }}
{{- else }}
{{- fail (printf "%s.url (or %s.existingSecret.name) is required: every pod must share one %s; per-pod files would hand out the same IDs on every pod" .what .what .what) }}
{{- end }}
{{- end -}}
