// The narrow-screen menu button (a file, not an inline handler: the CSP allows no inline script).
document.addEventListener("DOMContentLoaded", () => {
  const button = document.querySelector(".topbar .nav-toggle");
  if (!button) return;
  button.addEventListener("click", () => {
    const open = button.closest(".topbar").classList.toggle("open");
    button.setAttribute("aria-expanded", open);
  });
});
