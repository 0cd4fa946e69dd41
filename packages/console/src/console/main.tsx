import { render } from 'preact';
import '../shared/styles.css';
import 'uplot/dist/uPlot.min.css';
import { App } from './app.tsx';

render(<App />, document.getElementById('app')!);
