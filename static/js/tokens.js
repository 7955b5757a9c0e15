// The API tokens page: a Copy button for the token shown once (progressive: hidden without script).
for (const button of document.querySelectorAll("button[data-copy]")) {
  const source = document.querySelector(button.dataset.copy);
  if (!source || !navigator.clipboard) continue;
  button.hidden = false;
  button.addEventListener("click", async () => {
    await navigator.clipboard.writeText(source.textContent.trim());
    button.textContent = "Copied";
  });
}
