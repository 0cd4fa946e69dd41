import { render } from 'preact';
import '../shared/styles.css';
import { Viewer } from './viewer.tsx';

render(<Viewer />, document.getElementById('app')!);
