// Copy buttons: <button data-copy="#id"> copies that element's text (a key shown once). A
// delegated listener, so buttons swapped in by htmx work too; a file, as the CSP allows no
// inline script.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  if (!source) return;
  const text = source.textContent.trim();
  let copied = false;
  try {
    await navigator.clipboard.writeText(text);
    copied = true;
  } catch (_) {
    // no clipboard API (plain http on another host): select the text for Ctrl+C instead
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
  const status = document.getElementById(button.getAttribute("aria-describedby") || "");
  if (status) status.textContent = copied ? "Copied to the clipboard" : "Selected: press Ctrl+C to copy";
  button.textContent = copied ? "Copied" : "Copy";
});
