"""Theme and CSS of the workbench page. System fonts only: the page must render offline."""

import gradio as gr


def theme() -> gr.themes.Base:
    return gr.themes.Soft(
        primary_hue="blue",
        neutral_hue="slate",
        font=["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "sans-serif"],
        font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
    )


CSS = """
.wb-header { display: flex; align-items: center; gap: 12px; }
.wb-header h1 { margin: 0; font-size: 1.5rem; }
.wb-header p { margin: 2px 0 0; color: var(--body-text-color-subdued); }

.wb-select { display: flex; flex-direction: column; gap: 6px; }
.wb-select-label { width: fit-content; padding: var(--block-label-padding);
  border-radius: var(--block-label-radius); background: var(--block-label-background-fill);
  font-size: var(--block-label-text-size); font-weight: var(--block-label-text-weight);
  color: var(--block-label-text-color); }
.wb-select select { width: 100%; padding: 8px 10px; border-radius: var(--input-radius);
  border: 1px solid var(--input-border-color); background: var(--input-background-fill);
  color: var(--body-text-color); font-size: var(--input-text-size); appearance: auto;
  cursor: pointer; }
.wb-select option:disabled { color: #94a3b8; }
.wb-select-note { font-size: 12px; color: var(--body-text-color-subdued); }

.wb-badge { align-self: flex-start; display: inline-block; padding: 2px 10px; border-radius: 999px; font-weight: 600;
  font-size: 13px; }
.wb-ok { background: #dcfce7; color: #166534; }
.wb-warn { background: #fef3c7; color: #92400e; }
.wb-err { background: #fee2e2; color: #991b1b; }
.wb-muted { color: var(--body-text-color-subdued); font-size: 13px; }

.wb-live { display: flex; flex-direction: column; gap: 10px; }
.wb-idle { color: var(--body-text-color-subdued); padding: 8px 0; }
.wb-stepper { display: flex; gap: 4px; }
.wb-step { flex: 1; text-align: center; font-size: 12px; padding: 4px 0; border-radius: 4px;
  background: var(--background-fill-secondary); color: var(--body-text-color-subdued); }
.wb-step-done { background: #dbeafe; color: #1e3a8a; }
.wb-step-now { background: #2563eb; color: #fff; font-weight: 600; }
.wb-tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(96px, 1fr)); gap: 8px; }
.wb-tile { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 6px 8px; }
.wb-tile-value { font-size: 1.25rem; font-weight: 600; font-variant-numeric: tabular-nums; }
.wb-tile-label { font-size: 11px; color: var(--body-text-color-subdued); text-transform: uppercase;
  letter-spacing: .04em; }
.wb-activity { font-size: 14px; }
.wb-live-error { color: #991b1b; font-size: 13px; }

.wb-result { display: flex; flex-direction: column; gap: 8px; }
.wb-error-message { color: #991b1b; white-space: pre-wrap; font-size: 13px; }
.wb-facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 24px;
  font-size: 14px; }
.wb-fact-k { color: var(--body-text-color-subdued); }
.wb-rewards { margin: 0; font-size: 12px; }
.wb-findings { font-size: 12px; width: 100%; margin: 0; }
.wb-findings td, .wb-findings th { padding: 2px 6px; text-align: left; }
.wb-level-FATAL td:first-child { color: #991b1b; font-weight: 700; }
.wb-level-WARN td:first-child { color: #92400e; font-weight: 600; }

.wb-probe { font-size: 13px; }

.wb-tokens { font-size: 13px; }
.wb-tokens-head { margin-bottom: 6px; }
.wb-tokens-legend { display: flex; align-items: center; gap: 6px; font-size: 12px;
  color: var(--body-text-color-subdued); margin-bottom: 8px; }
.wb-legend-stop { display: inline-block; width: 18px; height: 12px; border-radius: 2px; }
.wb-legend-hint { margin-left: auto; }
.wb-tokens-note { color: #92400e; font-size: 12px; margin-bottom: 6px; }
.wb-tokens-body { font-family: var(--font-mono); white-space: pre-wrap; word-break: break-word;
  line-height: 1.7; max-height: 520px; overflow-y: auto; padding: 10px;
  border: 1px solid var(--border-color-primary); border-radius: 8px; }
.wb-tk { border-radius: 3px; padding: 1px 0; margin-right: 1px; }
.wb-tk-p { background: #e5e7eb; color: #374151; }
.wb-tk-s { color: #111827; outline: 1px solid rgba(0, 0, 0, .06); }
.wb-tk:hover { outline: 2px solid #1d4ed8; }
.wb-tk-id { color: #6b7280; font-size: 11px; }
.wb-ws { color: #9ca3af; }
.wb-elided { color: var(--body-text-color-subdued); font-style: italic; }
.wb-empty { color: var(--body-text-color-subdued); padding: 8px 0; }
"""
