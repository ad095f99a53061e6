// Stylesheets are bundled by esbuild; importing one only adds it to the page.
declare module '*.css' {}
